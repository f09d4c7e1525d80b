/*
 * print_probe - prints a response as cetcdctl would, for the differential
 * test tests/integration/test_ctl_print.py.
 *
 * Goal: let the test feed the exact response bytes etcdctl saw (its
 * `-w protobuf` output, or what a gRPC client fetched) through the
 * printers of src/ctl/print.h, to compare with etcdctl's own output.
 *
 * Method: read the wire bytes of the named message from stdin, decode
 * them with protobuf-c and print them in the named format, choosing the
 * printer etcdctl's printer*.go chooses for the command that answers with
 * that type.
 *
 *   print_probe <type> <format>          type etcdserverpb.RangeResponse,
 *                                        ...; format json, protobuf,
 *                                        table, fields, simple
 *   print_probe hashkv|status <format> <endpoint>
 *                                        stdin: a HashKVResponse or a
 *                                        StatusResponse of that endpoint
 *   print_probe dbstatus <format> <hash> <revision> <keys> <size>
 *   print_probe cells <ncols>            stdin: NUL-terminated cells, the
 *                                        header's first, for
 *                                        ctl_table_print
 *
 * An unsupported pairing prints etcdctl's error and exits 4.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/print.h"

static const ProtobufCMessageDescriptor *const types[] = {
    &etcdserverpb__range_response__descriptor,
    &etcdserverpb__put_response__descriptor,
    &etcdserverpb__delete_range_response__descriptor,
    &etcdserverpb__txn_response__descriptor,
    &etcdserverpb__watch_response__descriptor,
    &etcdserverpb__hash_kvresponse__descriptor,
    &etcdserverpb__status_response__descriptor,
    &etcdserverpb__lease_grant_response__descriptor,
    &etcdserverpb__lease_revoke_response__descriptor,
    &etcdserverpb__lease_keep_alive_response__descriptor,
    &etcdserverpb__lease_time_to_live_response__descriptor,
    &etcdserverpb__lease_leases_response__descriptor,
    &etcdserverpb__member_list_response__descriptor,
    &etcdserverpb__member_add_response__descriptor,
    &etcdserverpb__alarm_response__descriptor,
    &etcdserverpb__auth_user_get_response__descriptor,
    &etcdserverpb__auth_user_list_response__descriptor,
    &etcdserverpb__auth_role_get_response__descriptor,
    &etcdserverpb__auth_role_list_response__descriptor,
    &etcdserverpb__auth_user_add_response__descriptor,
    &etcdserverpb__auth_role_add_response__descriptor,
};

static int unsupported(const char *format)
{
    fputs("Error: ", stderr);
    ctl_unsupported(stderr, format);
    fputc('\n', stderr);
    return CTL_EXIT_BAD_FEATURE;
}

static ProtobufCMessage *read_message(const ProtobufCMessageDescriptor *d)
{
    static unsigned char buf[16 << 20];
    size_t n = fread(buf, 1, sizeof buf, stdin);
    if (n == sizeof buf || ferror(stdin)) {
        fprintf(stderr, "print_probe: input too large or unreadable\n");
        return NULL;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, n, buf);
    if (m == NULL)
        fprintf(stderr, "print_probe: cannot decode a %s\n", d->name);
    return m;
}

static bool is(const ProtobufCMessage *m, const char *name)
{
    return strcmp(m->descriptor->name, name) == 0;
}

#define AS(T, m) ((const T *)(m))

static int print_json(const ProtobufCMessage *m)
{
    if (is(m, "etcdserverpb.WatchResponse"))
        ctl_json_watch_response(stdout, AS(Etcdserverpb__WatchResponse, m),
                                AS(Etcdserverpb__WatchResponse, m)->n_events
                                    == 0);
    else if (is(m, "etcdserverpb.LeaseGrantResponse"))
        ctl_json_lease_grant(stdout, AS(Etcdserverpb__LeaseGrantResponse, m));
    else if (is(m, "etcdserverpb.LeaseKeepAliveResponse"))
        ctl_json_lease_keepalive(stdout,
                                 AS(Etcdserverpb__LeaseKeepAliveResponse, m));
    else if (is(m, "etcdserverpb.LeaseTimeToLiveResponse"))
        ctl_json_lease_timetolive(stdout,
                                  AS(Etcdserverpb__LeaseTimeToLiveResponse, m));
    else if (is(m, "etcdserverpb.LeaseLeasesResponse"))
        ctl_json_lease_leases(stdout, AS(Etcdserverpb__LeaseLeasesResponse, m));
    else
        ctl_json_message(stdout, m);
    return 0;
}

static const Etcdserverpb__ResponseHeader *header_of(const ProtobufCMessage *m)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor,
                                                        "header");
    if (fd == NULL)
        return NULL;
    return *(Etcdserverpb__ResponseHeader *const *)((const char *)m +
                                                    fd->offset);
}

static int print_pb(const ProtobufCMessage *m)
{
    if (is(m, "etcdserverpb.WatchResponse"))
        return ctl_pb_watch_response(stdout,
                                     AS(Etcdserverpb__WatchResponse, m));
    if (is(m, "etcdserverpb.LeaseRevokeResponse")) {
        fputs("Error: ", stderr);
        ctl_pb_lease_revoke_error(stderr,
                                  AS(Etcdserverpb__LeaseRevokeResponse, m));
        fputc('\n', stderr);
        return CTL_EXIT_BAD_FEATURE;
    }
    if (strncmp(m->descriptor->name, "etcdserverpb.Lease", 18) == 0) {
        const Etcdserverpb__ResponseHeader *h = header_of(m);
        return ctl_pb_message(stdout, h != NULL ? &h->base : NULL);
    }
    return ctl_pb_message(stdout, m);
}

/* hdr_only: the answers -w fields prints the header of. */
static bool hdr_only(const ProtobufCMessage *m)
{
    return is(m, "etcdserverpb.LeaseRevokeResponse") ||
           is(m, "etcdserverpb.AuthUserAddResponse") ||
           is(m, "etcdserverpb.AuthRoleAddResponse");
}

static int print_fields(const ProtobufCMessage *m)
{
#define CASE(name, fn, T)                                                      \
    if (is(m, "etcdserverpb." name)) {                                         \
        fn(stdout, AS(T, m));                                                  \
        return 0;                                                              \
    }
    CASE("RangeResponse", ctl_fields_range, Etcdserverpb__RangeResponse)
    CASE("PutResponse", ctl_fields_put, Etcdserverpb__PutResponse)
    CASE("DeleteRangeResponse", ctl_fields_delete,
         Etcdserverpb__DeleteRangeResponse)
    CASE("TxnResponse", ctl_fields_txn, Etcdserverpb__TxnResponse)
    CASE("WatchResponse", ctl_fields_watch, Etcdserverpb__WatchResponse)
    CASE("LeaseGrantResponse", ctl_fields_lease_grant,
         Etcdserverpb__LeaseGrantResponse)
    CASE("LeaseKeepAliveResponse", ctl_fields_lease_keepalive,
         Etcdserverpb__LeaseKeepAliveResponse)
    CASE("LeaseTimeToLiveResponse", ctl_fields_lease_timetolive,
         Etcdserverpb__LeaseTimeToLiveResponse)
    CASE("LeaseLeasesResponse", ctl_fields_lease_leases,
         Etcdserverpb__LeaseLeasesResponse)
    CASE("MemberListResponse", ctl_fields_member_list,
         Etcdserverpb__MemberListResponse)
    CASE("AlarmResponse", ctl_fields_alarm, Etcdserverpb__AlarmResponse)
    CASE("AuthRoleGetResponse", ctl_fields_role_get,
         Etcdserverpb__AuthRoleGetResponse)
    CASE("AuthRoleListResponse", ctl_fields_role_list,
         Etcdserverpb__AuthRoleListResponse)
#undef CASE
    if (hdr_only(m)) {
        ctl_fields_hdr(stdout, header_of(m));
        return 0;
    }
    return unsupported("fields");
}

static int print_simple(const ProtobufCMessage *m)
{
    if (is(m, "etcdserverpb.MemberListResponse"))
        return ctl_rows_member_list(
            stdout, AS(Etcdserverpb__MemberListResponse, m), false);
    if (is(m, "etcdserverpb.AlarmResponse")) {
        const Etcdserverpb__AlarmResponse *r =
            AS(Etcdserverpb__AlarmResponse, m);
        for (size_t i = 0; i < r->n_alarms; i++) {
            ctl_text_message(stdout, &r->alarms[i]->base);
            fputc('\n', stdout);
        }
        return 0;
    }
    if (is(m, "etcdserverpb.RangeResponse")) {
        const Etcdserverpb__RangeResponse *r =
            AS(Etcdserverpb__RangeResponse, m);
        for (size_t i = 0; i < r->n_kvs; i++)
            ctl_simple_kv(stdout, getenv("PROBE_HEX") != NULL, false,
                          r->kvs[i]);
        return 0;
    }
    fprintf(stderr, "print_probe: no simple printer for %s\n",
            m->descriptor->name);
    return 2;
}

/* endpoint runs the hashkv and status forms. */
static int endpoint(const char *what, const char *format, const char *ep)
{
    bool hashkv = strcmp(what, "hashkv") == 0;
    ProtobufCMessage *m =
        read_message(hashkv ? &etcdserverpb__hash_kvresponse__descriptor
                            : &etcdserverpb__status_response__descriptor);
    int rc = 0;
    if (m == NULL)
        return 2;
    struct ctl_ep_hashkv h = {ep, AS(Etcdserverpb__HashKVResponse, m)};
    struct ctl_ep_status s = {ep, AS(Etcdserverpb__StatusResponse, m)};
    if (strcmp(format, "json") == 0 && hashkv)
        ctl_json_endpoint_hashkv(stdout, &h, 1);
    else if (strcmp(format, "json") == 0)
        ctl_json_endpoint_status(stdout, &s, 1);
    else if (strcmp(format, "fields") == 0 && hashkv)
        ctl_fields_endpoint_hashkv(stdout, &h, 1);
    else if (strcmp(format, "fields") == 0)
        ctl_fields_endpoint_status(stdout, &s, 1);
    else if (strcmp(format, "table") == 0 || strcmp(format, "simple") == 0)
        rc = hashkv ? ctl_rows_endpoint_hashkv(stdout, &h, 1, format[0] == 't')
                    : ctl_rows_endpoint_status(stdout, &s, 1, format[0] == 't');
    else
        rc = unsupported(format);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

static int dbstatus(const char *format, char **v)
{
    struct ctl_db_status s = {(uint32_t)strtoul(v[0], NULL, 10),
                              strtoll(v[1], NULL, 10), strtoll(v[2], NULL, 10),
                              strtoll(v[3], NULL, 10)};
    if (strcmp(format, "json") == 0)
        ctl_json_db_status(stdout, &s);
    else if (strcmp(format, "fields") == 0)
        ctl_fields_db_status(stdout, &s);
    else if (strcmp(format, "table") == 0 || strcmp(format, "simple") == 0)
        return ctl_rows_db_status(stdout, &s, format[0] == 't');
    else
        return unsupported(format);
    return 0;
}

/* cells prints the NUL-terminated cells on stdin as a table of ncols. */
static int cells(size_t ncols)
{
    static char buf[1 << 20];
    static const char *cell[1 << 14];
    size_t n = fread(buf, 1, sizeof buf - 1, stdin), k = 0;
    if (ncols == 0 || n == sizeof buf - 1)
        return 2;
    for (size_t i = 0; i < n && k < sizeof cell / sizeof cell[0];) {
        cell[k++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    if (k < ncols || k % ncols != 0)
        return 2;
    return ctl_table_print(stdout, cell, ncols, cell + ncols, k / ncols - 1) ==
                   0
               ? 0
               : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "cells") == 0)
        return cells(strtoul(argv[2], NULL, 10));
    if (argc >= 4 &&
        (strcmp(argv[1], "hashkv") == 0 || strcmp(argv[1], "status") == 0))
        return endpoint(argv[1], argv[2], argv[3]);
    if (argc == 7 && strcmp(argv[1], "dbstatus") == 0)
        return dbstatus(argv[2], argv + 3);
    if (argc != 3) {
        fprintf(stderr, "usage: print_probe <type> <format>\n");
        return 2;
    }
    const ProtobufCMessageDescriptor *d = NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(types[i]->name, argv[1]) == 0)
            d = types[i];
    }
    if (d == NULL) {
        fprintf(stderr, "print_probe: unknown type %s\n", argv[1]);
        return 2;
    }
    ProtobufCMessage *m = read_message(d);
    if (m == NULL)
        return 2;
    int rc;
    const char *fmt = argv[2];
    if (strcmp(fmt, "json") == 0)
        rc = print_json(m);
    else if (strcmp(fmt, "protobuf") == 0)
        rc = print_pb(m);
    else if (strcmp(fmt, "fields") == 0)
        rc = print_fields(m);
    else if (strcmp(fmt, "simple") == 0)
        rc = print_simple(m);
    else if (strcmp(fmt, "table") == 0)
        rc = is(m, "etcdserverpb.MemberListResponse")
                 ? ctl_rows_member_list(
                       stdout, AS(Etcdserverpb__MemberListResponse, m), true)
                 : unsupported("table");
    else
        rc = unsupported(fmt);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}
