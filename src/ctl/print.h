/*
 * print.h - the output printers of cetcdctl: what etcdctl 3.4.23 writes for
 * `-w json`, `-w protobuf`, `-w table`, `-w fields` and the pieces of its
 * default ("simple") output that need Go's formatting, byte for byte.
 *
 * The commands call these with the response they got; this module only
 * formats.  Everything writes to a FILE * (tests use open_memstream).
 * Write errors are the caller's to see with ferror(f); the functions that
 * return an int also return ERR_IO for them.
 *
 * What etcdctl prints per command and format (printer*.go of etcdctl):
 *
 *   command            json                      protobuf
 *   get/put/del/txn,   ctl_json_message(resp)    ctl_pb_message(resp)
 *   member *, alarm,
 *   user/role *,
 *   move-leader,
 *   lease revoke       ctl_json_message(resp)    ctl_pb_lease_revoke_error
 *   watch              ctl_json_watch_response   ctl_pb_watch_response
 *   lease grant        ctl_json_lease_grant      ctl_pb_message(header)
 *   lease keep-alive   ctl_json_lease_keepalive  ctl_pb_message(header)
 *   lease timetolive   ctl_json_lease_timetolive ctl_pb_message(header)
 *   lease list         ctl_json_lease_leases     ctl_pb_message(header)
 *   endpoint health    ctl_json_endpoint_health  unsupported
 *   endpoint status    ctl_json_endpoint_status  unsupported
 *   endpoint hashkv    ctl_json_endpoint_hashkv  unsupported
 *   snapshot status    ctl_json_db_status        unsupported
 *
 * (etcdctl's lease responses are clientv3 structs that embed
 * *pb.ResponseHeader, whose Marshal they inherit: `-w protobuf` writes the
 * header alone.  lease revoke's has no Marshal at all.)  `-w table` serves
 * member list, endpoint health/status/hashkv and snapshot status only
 * (ctl_table_*); `-w fields` serves what ctl_fields_* cover.  Any other
 * pairing is "<format> not supported as output format" (ctl_unsupported),
 * exit code CTL_EXIT_BAD_FEATURE.  etcdctl's `member promote` with json,
 * protobuf, table or fields panics (its printers lack the method); the
 * commands decide what to do there.
 *
 * Threads: none kept; every function is reentrant.  Borrowed pointers are
 * only read during the call.
 */
#ifndef CETCD_CTL_PRINT_H
#define CETCD_CTL_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#include "ctl/ctl.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "mvccpb/kv.pb-c.h"

/* CTL_EXIT_BAD_FEATURE (ctl.h) is etcdctl's exit code when a format cannot
 * print a command's answer. */

/* ---- Inputs of the printers of etcdctl's own (non-protobuf) structs ---- */

/* One `endpoint health` result (etcdctl's epHealth). */
struct ctl_ep_health {
    const char *ep;    /* the endpoint as given */
    bool health;       /* the probe succeeded */
    const char *took;  /* its duration (ctl_duration), "" if none */
    const char *error; /* why it failed; "" or NULL when it did not */
};

/* One `endpoint status` result (epStatus); resp NULL prints null. */
struct ctl_ep_status {
    const char *ep;                           /* the endpoint */
    const Etcdserverpb__StatusResponse *resp; /* its answer */
};

/* One `endpoint hashkv` result (epHashKV); resp NULL prints null. */
struct ctl_ep_hashkv {
    const char *ep;                           /* the endpoint */
    const Etcdserverpb__HashKVResponse *resp; /* its answer */
};

/* `snapshot status` (clientv3/snapshot.Status). */
struct ctl_db_status {
    uint32_t hash;      /* crc32 of the buckets */
    int64_t revision;   /* the snapshot's revision */
    int64_t total_key;  /* keys in all buckets */
    int64_t total_size; /* the file's bytes */
};

/* ---- JSON (print_json.c, print_json_wrap.c) ----
 *
 * etcdctl -w json is Go's encoding/json Marshal of the gogo-protobuf Go
 * structs, then a newline.  ctl_json_message writes exactly that for any
 * protobuf-c message, driven by its descriptor:
 *   - keys are the proto field names (the Go json tags), in field number
 *     order; a zero number, false, "", empty bytes, no elements or no
 *     message is left out (omitempty); a message present but empty is {};
 *   - all integers (64-bit too) as JSON numbers, enums as numbers, bytes as
 *     standard base64 with padding, messages as objects;
 *   - a oneof is Go's interface field: its Go name as key ("Request",
 *     "Response", "TargetUnion", "RequestUnion"), null when unset, else
 *     {"RequestRange": value} with the member always written (even zero);
 *   - strings escaped as encoding/json does: \" \\ \n \r \t, other control
 *     characters and < > & as \u00XX, U+2028/2029 as \u2028/\u2029, each
 *     byte of invalid UTF-8 as \ufffd;
 *   - fields cetcd's protos have and etcd 3.4's do not (HashKVResponse
 *     hash_revision) are left out, as etcdctl 3.4 never decodes them.
 * Floats (no etcd message has one) are written shortest-round-trip.
 */

/* ctl_json_message writes m as JSON and a newline (printJSON).  m NULL
 * writes "null\n". */
void ctl_json_message(FILE *f, const ProtobufCMessage *m);

/* ctl_json_string writes n bytes of s as a JSON string, Go's escaping. */
void ctl_json_string(FILE *f, const char *s, size_t n);

/* A builder for the JSON of structs that are not protobuf messages.  The
 * caller owns it (on the stack); ctl_json_init before use.  Values go where
 * the structure is: after a key in an object, or as an array element; the
 * builder writes the commas.  Nesting is at most CTL_JSON_DEPTH_MAX deep
 * (asserted).  Nothing is allocated. */
#define CTL_JSON_DEPTH_MAX 16
struct ctl_json {
    FILE *f;                           /* where the text goes */
    unsigned depth;                    /* containers open */
    bool more[CTL_JSON_DEPTH_MAX + 1]; /* level holds a value: comma due */
    bool keyed;                        /* a key waits for its value */
};

void ctl_json_init(struct ctl_json *j, FILE *f);
void ctl_json_begin_object(struct ctl_json *j);
void ctl_json_end_object(struct ctl_json *j);
void ctl_json_begin_array(struct ctl_json *j);
void ctl_json_end_array(struct ctl_json *j);
/* ctl_json_key writes an object member's name (escaped); a value must
 * follow. */
void ctl_json_key(struct ctl_json *j, const char *name);
void ctl_json_i64(struct ctl_json *j, int64_t v);
void ctl_json_u64(struct ctl_json *j, uint64_t v);
void ctl_json_bool(struct ctl_json *j, bool v);
void ctl_json_null(struct ctl_json *j);
/* ctl_json_str writes a C string (NULL: ""); ctl_json_strn n bytes. */
void ctl_json_str(struct ctl_json *j, const char *s);
void ctl_json_strn(struct ctl_json *j, const char *s, size_t n);
/* ctl_json_bytes_b64 writes n bytes as a base64 string ([]byte). */
void ctl_json_bytes_b64(struct ctl_json *j, const void *p, size_t n);
/* ctl_json_message_value writes m as an object (NULL: null). */
void ctl_json_message_value(struct ctl_json *j, const ProtobufCMessage *m);
/* ctl_json_message_fields writes m's members into the open object, as Go
 * inlines an embedded struct pointer (clientv3's *pb.ResponseHeader);
 * m NULL writes nothing, as Go skips a nil embedded pointer. */
void ctl_json_message_fields(struct ctl_json *j, const ProtobufCMessage *m);

/* The clientv3 and etcdctl structs, each followed by a newline:
 * watch: {"Header":{..},"Events":[..]|null,"CompactRevision":N,
 *   "Canceled":b,"Created":b} (watch_id, fragment, cancel_reason are not in
 *   clientv3.WatchResponse); lease grant: header members inlined, "ID",
 *   "TTL", "Error"; keep-alive: header, "ID", "TTL"; timetolive: header,
 *   "id", "ttl", "granted-ttl", "keys" (null when none); lease list:
 *   header, "leases":[{"id":N},..]; endpoint health: [{"endpoint","health",
 *   "took"[,"error"]}..]; status: [{"Endpoint","Status"}..]; hashkv:
 *   [{"Endpoint","HashKV"}..]; db status: {"hash","revision","totalKey",
 *   "totalSize"}.  A NULL response prints as Go prints a zero struct.
 *   watch: nil_events writes "Events":null (the zero response clientv3
 *   passes on with a closing error leaves its slice nil); otherwise an
 *   array, [] when empty (every other response has its slice made). */
void ctl_json_watch_response(FILE *f, const Etcdserverpb__WatchResponse *r,
                             bool nil_events);
void ctl_json_lease_grant(FILE *f, const Etcdserverpb__LeaseGrantResponse *r);
void ctl_json_lease_keepalive(FILE *f,
                              const Etcdserverpb__LeaseKeepAliveResponse *r);
void ctl_json_lease_timetolive(FILE *f,
                               const Etcdserverpb__LeaseTimeToLiveResponse *r);
void ctl_json_lease_leases(FILE *f, const Etcdserverpb__LeaseLeasesResponse *r);
void ctl_json_endpoint_health(FILE *f, const struct ctl_ep_health *v, size_t n);
void ctl_json_endpoint_status(FILE *f, const struct ctl_ep_status *v, size_t n);
void ctl_json_endpoint_hashkv(FILE *f, const struct ctl_ep_hashkv *v, size_t n);
void ctl_json_db_status(FILE *f, const struct ctl_db_status *s);

/* ---- Protobuf (print_pb.c) ----
 *
 * ctl_pb_message writes m in the wire format as gogo's Marshal of the Go
 * struct writes it: fields by number, proto3 zero values left out, oneof
 * members and present messages always written, packed repeated scalars,
 * no unknown fields and no field etcd 3.4 lacks.  No newline.  m NULL
 * writes nothing (a nil header's Marshal).  Returns 0 or ERR_IO. */
int ctl_pb_message(FILE *f, const ProtobufCMessage *m);

/* ctl_pb_watch_response writes the pb.WatchResponse etcdctl rebuilds from
 * clientv3's: header (always, {} if NULL), events, compact_revision,
 * canceled, created.  Returns 0 or ERR_IO. */
int ctl_pb_watch_response(FILE *f, const Etcdserverpb__WatchResponse *r);

/* ctl_pb_lease_revoke_error writes the text of etcdctl's error for
 * `lease revoke -w protobuf`: "marshal unsupported for type
 * clientv3.LeaseRevokeResponse ({<header as text format>})" (no "Error: ",
 * no newline); etcdctl then exits CTL_EXIT_BAD_FEATURE. */
void ctl_pb_lease_revoke_error(FILE *f,
                               const Etcdserverpb__LeaseRevokeResponse *r);

/* ctl_unsupported writes "<format> not supported as output format". */
void ctl_unsupported(FILE *f, const char *format);

/* ctl_text_message writes m in the protobuf compact text format
 * (proto.CompactTextString, what Go's %v of a message gives): "name:value "
 * per set field, strings quoted with octal escapes, enums by name, messages
 * as "name:<...> ".  The simple printer of `alarm list` prints each alarm
 * so, then a newline. */
void ctl_text_message(FILE *f, const ProtobufCMessage *m);

/* ---- Tables (print_table.c, print_rows.c) ----
 *
 * ctl_table_print renders what olekukonko/tablewriter renders as etcdctl
 * configures it: borders of + - |, a header line upper-cased (tablewriter's
 * Title: '_' and most '.' become spaces, trimmed, Go's Unicode upper
 * case) and centred, cells
 * right-aligned, column widths by display width (East Asian wide = 2,
 * combining and control = 0, grapheme clusters counted once, ANSI colour
 * sequences ignored), and tablewriter's auto-wrap: a cell's lines are
 * joined into one paragraph, re-wrapped at spaces with minimal raggedness
 * to at most 30 columns (or its widest word).  cells holds nrows * ncols
 * strings, row by row; NULL is "".  hdr NULL: no header.  Returns 0,
 * ERR_NOMEM or ERR_IO. */
#define CTL_TABLE_WRAP_WIDTH 30
int ctl_table_print(FILE *f, const char *const *hdr, size_t ncols,
                    const char *const *cells, size_t nrows);

/* The tables etcdctl builds (printer.go make*Table), written as a table
 * (table true) or, as the simple printer does, one line per row with the
 * cells joined by ", " (not for endpoint health, whose simple output is
 * etcdctl's "<ep> is healthy: ..." lines on stderr).  Return 0, ERR_NOMEM
 * or ERR_IO. */
int ctl_rows_member_list(FILE *f, const Etcdserverpb__MemberListResponse *r,
                         bool table);
int ctl_rows_endpoint_health(FILE *f, const struct ctl_ep_health *v, size_t n,
                             bool table);
int ctl_rows_endpoint_status(FILE *f, const struct ctl_ep_status *v, size_t n,
                             bool table);
int ctl_rows_endpoint_hashkv(FILE *f, const struct ctl_ep_hashkv *v, size_t n,
                             bool table);
int ctl_rows_db_status(FILE *f, const struct ctl_db_status *s, bool table);

/* ---- Fields (print_fields.c) ----
 *
 * etcdctl -w fields: one `"Name" : value` line per item, integers in
 * decimal, strings and keys as Go's %q (ctl_quote).  A NULL header or
 * response prints as zero values (etcdctl would crash on a nil header). */

/* The header block: "ClusterID", "MemberID", "Revision", "RaftTerm". */
void ctl_fields_hdr(FILE *f, const Etcdserverpb__ResponseHeader *h);
/* A key-value block, names prefixed by pfx ("" or "Prev"): Key,
 * CreateRevision, ModRevision, Version, Value, Lease. */
void ctl_fields_kv(FILE *f, const char *pfx, const Mvccpb__KeyValue *kv);

/* The whole answer of each command -w fields serves.  Commands that print
 * the header alone (lease revoke, role add/delete/grant/revoke, user add/
 * delete/passwd/grant/revoke) call ctl_fields_hdr. */
void ctl_fields_range(FILE *f, const Etcdserverpb__RangeResponse *r);
void ctl_fields_put(FILE *f, const Etcdserverpb__PutResponse *r);
void ctl_fields_delete(FILE *f, const Etcdserverpb__DeleteRangeResponse *r);
void ctl_fields_txn(FILE *f, const Etcdserverpb__TxnResponse *r);
void ctl_fields_watch(FILE *f, const Etcdserverpb__WatchResponse *r);
void ctl_fields_lease_grant(FILE *f, const Etcdserverpb__LeaseGrantResponse *r);
void ctl_fields_lease_keepalive(FILE *f,
                                const Etcdserverpb__LeaseKeepAliveResponse *r);
void ctl_fields_lease_timetolive(
    FILE *f, const Etcdserverpb__LeaseTimeToLiveResponse *r);
void ctl_fields_lease_leases(FILE *f,
                             const Etcdserverpb__LeaseLeasesResponse *r);
void ctl_fields_member_list(FILE *f, const Etcdserverpb__MemberListResponse *r);
void ctl_fields_alarm(FILE *f, const Etcdserverpb__AlarmResponse *r);
void ctl_fields_role_get(FILE *f, const Etcdserverpb__AuthRoleGetResponse *r);
void ctl_fields_role_list(FILE *f, const Etcdserverpb__AuthRoleListResponse *r);
void ctl_fields_endpoint_health(FILE *f, const struct ctl_ep_health *v,
                                size_t n);
void ctl_fields_endpoint_status(FILE *f, const struct ctl_ep_status *v,
                                size_t n);
void ctl_fields_endpoint_hashkv(FILE *f, const struct ctl_ep_hashkv *v,
                                size_t n);
void ctl_fields_db_status(FILE *f, const struct ctl_db_status *s);

/* ---- Go formatting for the simple printer (print_util.c) ---- */

/* ctl_quote writes n bytes as Go's strconv.Quote (%q of a string): in
 * double quotes, \a \b \f \n \r \t \v \\ \", other non-printable runes as
 * \u00XX / \uXXXX / \UXXXXXXXX, bytes of invalid UTF-8 as \xXX; printable
 * runes (Go's unicode.IsPrint) as they are. */
void ctl_quote(FILE *f, const void *p, size_t n);

/* ctl_hex_escaped writes n bytes as etcdctl --hex prints keys and values:
 * "\x61\x62" (lower-case hex, four characters per byte). */
void ctl_hex_escaped(FILE *f, const void *p, size_t n);

/* ctl_simple_kv prints a key-value as etcdctl's printKV: the key on one
 * line (unless value_only), the value on the next; raw, or hex-escaped. */
void ctl_simple_kv(FILE *f, bool hex, bool value_only,
                   const Mvccpb__KeyValue *kv);

/* ctl_humanize_bytes writes go-humanize's Bytes(n) ("0 B", "999 B",
 * "1.0 kB", "20 kB", "1.2 MB", "18 EB": SI units, one decimal below 10)
 * into buf (cap bytes, NUL-terminated, cut if short); returns buf.
 * CTL_HUMAN_MAX bytes always suffice. */
#define CTL_HUMAN_MAX 16
char *ctl_humanize_bytes(char *buf, size_t cap, uint64_t n);

/* ctl_duration writes ns as Go's time.Duration.String ("0s", "1.5µs",
 * "1.234567ms", "2m0s", "-1h1m1s"); like ctl_humanize_bytes.
 * CTL_DURATION_MAX bytes always suffice. */
#define CTL_DURATION_MAX 40
char *ctl_duration(char *buf, size_t cap, int64_t ns);

/* ctl_id_hex writes id as %x (lower case, no padding), the form etcdctl
 * shows member and lease IDs in; CTL_ID_MAX bytes suffice.  Returns buf. */
#define CTL_ID_MAX 17
char *ctl_id_hex(char *buf, size_t cap, uint64_t id);

/* ctl_display_width is the width of n bytes of UTF-8 in terminal columns,
 * as tablewriter measures it (see ctl_table_print). */
size_t ctl_display_width(const char *s, size_t n);

#endif
