/*
 * ctl_lease.c - "lease grant|revoke|timetolive|list|keep-alive": etcdctl's
 * lease commands, with lease ids in hex as etcdctl prints and parses them,
 * and its outputs in every format it supports.
 *
 * etcdctl's lease printers take clientv3 structs that embed
 * *pb.ResponseHeader: `-w protobuf` writes the header only, `-w table`
 * fails after the call ("table not supported as output format", exit 4),
 * and `lease revoke -w protobuf` fails too (print.h says why).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_session.h"
#include "ctl/print.h"

/* ------------------------------------------------------------------------
 * Go's formatting and parsing of ids
 * ---------------------------------------------------------------------- */

/* go_hex016 writes an int64 as Go's %016x: a negative id keeps its sign
 * inside the width ("-000000000000001"). */
static const char *go_hex016(char *buf, size_t cap, int64_t v)
{
    if (v >= 0)
        snprintf(buf, cap, "%016" PRIx64, (uint64_t)v);
    else
        snprintf(buf, cap, "-%015" PRIx64, (uint64_t)0 - (uint64_t)v);
    return buf;
}

/* go_parse_int is Go's strconv.ParseInt(s, base, 64) for base 10 or 16
 * (a sign, then digits; no prefixes or underscores).  On failure err gets
 * its error text. */
static int go_parse_int(const char *s, int base, int64_t *out, char *err,
                        size_t cap)
{
    const char *p = s;
    bool neg = *p == '-';
    if (*p == '+' || *p == '-')
        p++;
    uint64_t n = 0, limit = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
    const char *why = *p ? NULL : "invalid syntax";
    for (; *p && !why; p++) {
        int d = *p >= '0' && *p <= '9'   ? *p - '0'
                : *p >= 'a' && *p <= 'z' ? *p - 'a' + 10
                : *p >= 'A' && *p <= 'Z' ? *p - 'A' + 10
                                         : 99;
        if (d >= base)
            why = "invalid syntax";
        else if (n > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            why = "value out of range"; /* past 64 bits: Go stops here */
        else
            n = n * (uint64_t)base + (uint64_t)d;
    }
    if (!why && n > limit)
        why = "value out of range";
    if (why) {
        char *q = NULL;
        size_t qn = 0;
        FILE *f = open_memstream(&q, &qn);
        if (f) {
            ctl_quote(f, s, strlen(s));
            fclose(f);
        }
        snprintf(err, cap, "strconv.ParseInt: parsing %s: %s", q ? q : "",
                 why);
        free(q);
        return -1;
    }
    *out = neg ? (int64_t)((uint64_t)0 - n) : (int64_t)n;
    return 0;
}

/* lease_from_arg parses a lease id as etcdctl's leaseFromArgs. */
static int64_t lease_from_arg(const char *arg)
{
    char err[512];
    int64_t id = 0;
    if (go_parse_int(arg, 16, &id, err, sizeof err) != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "bad lease ID arg (%s), expecting ID in Hex", err);
    return id;
}

/* lease_call makes a unary Lease call within --command-timeout; on
 * failure returns NULL with etcdctl's text for it in text. */
static ProtobufCMessage *lease_call(const char *method,
                                    const ProtobufCMessage *req,
                                    const ProtobufCMessageDescriptor *desc,
                                    char *text, size_t cap)
{
    ProtobufCMessage *resp = NULL;
    struct cetcd_status st = {0};
    if (cetcd_call_unary(ctl_client(), method, req, desc, &resp, &st) != 0) {
        ctl_status_text(&st, text, cap);
        return NULL;
    }
    return resp;
}

/* header_pb writes what etcdctl's -w protobuf writes for a lease answer:
 * the Marshal of the embedded response header. */
static void header_pb(const Etcdserverpb__ResponseHeader *h)
{
    (void)ctl_pb_message(stdout, h ? &h->base : NULL);
}

static __attribute__((noreturn)) void table_unsupported(void)
{
    ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
}

/* ------------------------------------------------------------------------
 * lease grant
 * ---------------------------------------------------------------------- */

static int grant_run(int argc, char **argv)
{
    char err[512];
    int64_t ttl = 0;
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "lease grant command needs TTL argument");
    if (go_parse_int(argv[0], 10, &ttl, err, sizeof err) != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "bad TTL (%s)", err);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__LeaseGrantRequest req =
        ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    req.ttl = ttl;
    Etcdserverpb__LeaseGrantResponse *r =
        (Etcdserverpb__LeaseGrantResponse *)lease_call(
            "/etcdserverpb.Lease/LeaseGrant", &req.base,
            &etcdserverpb__lease_grant_response__descriptor, err, sizeof err);
    if (!r)
        ctl_exit(CTL_EXIT_ERROR, "failed to grant lease (%s)", err);
    char hex[24];
    switch (out) {
    case CTL_OUT_SIMPLE:
        printf("lease %s granted with TTL(%" PRId64 "s)\n",
               go_hex016(hex, sizeof hex, r->id), r->ttl);
        break;
    case CTL_OUT_JSON:
        ctl_json_lease_grant(stdout, r);
        break;
    case CTL_OUT_PROTOBUF:
        header_pb(r->header);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_lease_grant(stdout, r);
        break;
    case CTL_OUT_TABLE:
        table_unsupported();
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd grant_cmd = {
    .use = "grant <ttl>",
    .short_desc = "Creates leases",
    .run = grant_run,
};

/* ------------------------------------------------------------------------
 * lease revoke
 * ---------------------------------------------------------------------- */

/* revoke_pb_fail exits as etcdctl's protobuf printer does for revoke. */
static __attribute__((noreturn)) void
revoke_pb_fail(const Etcdserverpb__LeaseRevokeResponse *r)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    ctl_pb_lease_revoke_error(f, r);
    fclose(f);
    ctl_exit(CTL_EXIT_BAD_FEATURE, "%s", text);
}

static int revoke_run(int argc, char **argv)
{
    char err[512], hex[24];
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "lease revoke command needs 1 argument");
    int64_t id = lease_from_arg(argv[0]);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__LeaseRevokeRequest req =
        ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    req.id = id;
    Etcdserverpb__LeaseRevokeResponse *r =
        (Etcdserverpb__LeaseRevokeResponse *)lease_call(
            "/etcdserverpb.Lease/LeaseRevoke", &req.base,
            &etcdserverpb__lease_revoke_response__descriptor, err, sizeof err);
    if (!r)
        ctl_exit(CTL_EXIT_ERROR, "failed to revoke lease (%s)", err);
    switch (out) {
    case CTL_OUT_SIMPLE:
        printf("lease %s revoked\n", go_hex016(hex, sizeof hex, id));
        break;
    case CTL_OUT_JSON:
        ctl_json_message(stdout, &r->base);
        break;
    case CTL_OUT_PROTOBUF:
        revoke_pb_fail(r);
    case CTL_OUT_FIELDS:
        ctl_fields_hdr(stdout, r->header);
        break;
    case CTL_OUT_TABLE:
        table_unsupported();
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd revoke_cmd = {
    .use = "revoke <leaseID>",
    .short_desc = "Revokes leases",
    .run = revoke_run,
};

/* ------------------------------------------------------------------------
 * lease timetolive
 * ---------------------------------------------------------------------- */

static bool ttl_keys;

static struct ctl_flag ttl_flags[] = {
    {"keys", 0, CTL_FLAG_BOOL, &ttl_keys, "false",
     "Get keys attached to this lease", false},
    CTL_FLAG_END,
};

/* ttl_simple prints the simple printer's line for TimeToLive. */
static void ttl_simple(const Etcdserverpb__LeaseTimeToLiveResponse *r)
{
    char hex[24];
    go_hex016(hex, sizeof hex, r->id);
    if (r->grantedttl == 0 && r->ttl == -1) {
        printf("lease %s already expired\n", hex);
        return;
    }
    printf("lease %s granted with TTL(%" PRId64 "s), remaining(%" PRId64 "s)",
           hex, r->grantedttl, r->ttl);
    if (ttl_keys) {
        /* Go's %v of a []string: the raw strings, space-separated */
        fputs(", attached keys([", stdout);
        for (size_t i = 0; i < r->n_keys; i++) {
            if (i)
                fputc(' ', stdout);
            fwrite(r->keys[i].data, 1, r->keys[i].len, stdout);
        }
        fputs("])", stdout);
    }
    fputc('\n', stdout);
}

/* etcdctl asks with context.TODO(): against a server that does not answer
 * it waits forever.  cetcdctl gives up after --command-timeout, with the
 * same exit code as any other failure of this command. */
static int ttl_run(int argc, char **argv)
{
    char err[512];
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "lease timetolive command needs lease ID as argument");
    /* etcdctl makes its client (and printer) before parsing the id */
    enum ctl_output out = ctl_output_format();
    (void)ctl_client();
    Etcdserverpb__LeaseTimeToLiveRequest req =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    req.id = lease_from_arg(argv[0]);
    req.keys = ttl_keys;
    Etcdserverpb__LeaseTimeToLiveResponse *r =
        (Etcdserverpb__LeaseTimeToLiveResponse *)lease_call(
            "/etcdserverpb.Lease/LeaseTimeToLive", &req.base,
            &etcdserverpb__lease_time_to_live_response__descriptor, err,
            sizeof err);
    if (!r)
        ctl_exit(CTL_EXIT_BAD_CONNECTION, "%s", err);
    switch (out) {
    case CTL_OUT_SIMPLE:
        ttl_simple(r);
        break;
    case CTL_OUT_JSON:
        ctl_json_lease_timetolive(stdout, r);
        break;
    case CTL_OUT_PROTOBUF:
        header_pb(r->header);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_lease_timetolive(stdout, r);
        break;
    case CTL_OUT_TABLE:
        table_unsupported();
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd ttl_cmd = {
    .use = "timetolive <leaseID> [options]",
    .short_desc = "Get lease information",
    .flags = ttl_flags,
    .run = ttl_run,
};

/* ------------------------------------------------------------------------
 * lease list
 * ---------------------------------------------------------------------- */

/* As timetolive, etcdctl waits forever here; cetcdctl does not. */
static int list_run(int argc, char **argv)
{
    char err[512], hex[24];
    (void)argc, (void)argv; /* etcdctl ignores arguments */
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__LeaseLeasesRequest req =
        ETCDSERVERPB__LEASE_LEASES_REQUEST__INIT;
    Etcdserverpb__LeaseLeasesResponse *r =
        (Etcdserverpb__LeaseLeasesResponse *)lease_call(
            "/etcdserverpb.Lease/LeaseLeases", &req.base,
            &etcdserverpb__lease_leases_response__descriptor, err, sizeof err);
    if (!r)
        ctl_exit(CTL_EXIT_BAD_CONNECTION, "%s", err);
    switch (out) {
    case CTL_OUT_SIMPLE:
        printf("found %zu leases\n", r->n_leases);
        for (size_t i = 0; i < r->n_leases; i++)
            printf("%s\n", go_hex016(hex, sizeof hex, r->leases[i]->id));
        break;
    case CTL_OUT_JSON:
        ctl_json_lease_leases(stdout, r);
        break;
    case CTL_OUT_PROTOBUF:
        header_pb(r->header);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_lease_leases(stdout, r);
        break;
    case CTL_OUT_TABLE:
        table_unsupported();
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd list_cmd = {
    .use = "list",
    .short_desc = "List all active leases",
    .run = list_run,
};

/* ------------------------------------------------------------------------
 * lease keep-alive
 * ---------------------------------------------------------------------- */

static bool ka_once;

static struct ctl_flag ka_flags[] = {
    {"once", 0, CTL_FLAG_BOOL, &ka_once, "false",
     "Resets the keep-alive time to its original value and exits "
     "immediately",
     false},
    CTL_FLAG_END,
};

/* ka_display prints one keep-alive answer (display.KeepAlive). */
static void ka_display(void *arg, const Etcdserverpb__LeaseKeepAliveResponse *r)
{
    char hex[24];
    switch (*(const enum ctl_output *)arg) {
    case CTL_OUT_SIMPLE:
        printf("lease %s keepalived with TTL(%" PRId64 ")\n",
               go_hex016(hex, sizeof hex, r->id), r->ttl);
        break;
    case CTL_OUT_JSON:
        ctl_json_lease_keepalive(stdout, r);
        break;
    case CTL_OUT_PROTOBUF:
        header_pb(r->header);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_lease_keepalive(stdout, r);
        break;
    case CTL_OUT_TABLE:
        table_unsupported();
    }
    fflush(stdout); /* a reader waits for each line, as for Go's */
}

/* once_try is one KeepAliveOnce round trip: 0 with *resp_out, or a
 * status code with st. */
static int once_try(int64_t id, int timeout_ms, ProtobufCMessage **resp_out,
                    struct cetcd_status *st)
{
    struct cetcd_stream *s = NULL;
    struct cetcd_stream_opts o = {0};
    o.timeout_ms = timeout_ms;
    int rc = cetcd_stream_open(
        ctl_client(), "/etcdserverpb.Lease/LeaseKeepAlive",
        &etcdserverpb__lease_keep_alive_response__descriptor, &o, &s, st);
    if (rc != 0)
        return rc;
    Etcdserverpb__LeaseKeepAliveRequest req =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    req.id = id;
    rc = cetcd_stream_send(s, &req.base, st);
    if (rc == 0)
        rc = cetcd_stream_recv(s, -1, resp_out, st);
    if (rc == 0 && !*resp_out) { /* the server ended the call: Go's EOF */
        rc = CETCD_UNKNOWN;
        snprintf(st->message, sizeof st->message, "EOF");
    }
    cetcd_stream_close(s);
    return rc;
}

/* keep_once is KeepAliveOnce: clientv3 retries while the server cannot be
 * reached, under context.TODO() forever; cetcdctl stops retrying after
 * --command-timeout ("context deadline exceeded"). */
static int keep_once(int64_t id, enum ctl_output out)
{
    int64_t end = ctl_sess_now_ms() + ctl_timeout_ms();
    for (;;) {
        ProtobufCMessage *m = NULL;
        struct cetcd_status st = {0};
        int64_t left = end - ctl_sess_now_ms();
        int rc = left > 0 ? once_try(id, (int)left, &m, &st)
                          : CETCD_DEADLINE_EXCEEDED;
        if (rc == 0) {
            Etcdserverpb__LeaseKeepAliveResponse *r =
                (Etcdserverpb__LeaseKeepAliveResponse *)m;
            if (r->ttl <= 0)
                ctl_exit(CTL_EXIT_BAD_CONNECTION,
                         "etcdserver: requested lease not found");
            ka_display(&out, r);
            protobuf_c_message_free_unpacked(m, NULL);
            return CTL_EXIT_SUCCESS;
        }
        if (rc == CETCD_DEADLINE_EXCEEDED || ctl_sess_now_ms() >= end)
            ctl_exit(CTL_EXIT_BAD_CONNECTION, "context deadline exceeded");
        if (rc != CETCD_UNAVAILABLE && rc != CETCD_INTERNAL)
            ctl_exit_status(CTL_EXIT_BAD_CONNECTION, &st);
        ctl_sess_sleep_ms(50);
    }
}

static int ka_run(int argc, char **argv)
{
    static atomic_bool never; /* etcdctl's loop ends only with the lease */
    char hex[24];
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "lease keep-alive command needs lease ID as argument");
    int64_t id = lease_from_arg(argv[0]);
    enum ctl_output out = ctl_output_format();
    struct cetcd_client *c = ctl_client();
    if (ka_once)
        return keep_once(id, out);
    (void)ctl_keepalive_run(c, id, ctl_keepalive_first_timeout_ms(),
                            ka_display, &out, &never);
    if (out == CTL_OUT_SIMPLE)
        printf("lease %s expired or revoked.\n",
               go_hex016(hex, sizeof hex, id));
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd ka_cmd = {
    .use = "keep-alive [options] <leaseID>",
    .short_desc = "Keeps leases alive (renew)",
    .flags = ka_flags,
    .run = ka_run,
};

/* ------------------------------------------------------------------------
 * lease
 * ---------------------------------------------------------------------- */

static const struct ctl_cmd *const lease_subs[] = {
    &grant_cmd, &revoke_cmd, &ttl_cmd, &list_cmd, &ka_cmd, NULL,
};

const struct ctl_cmd ctl_cmd_lease = {
    .use = "lease <subcommand>",
    .short_desc = "Lease related commands",
    .subs = lease_subs,
};
