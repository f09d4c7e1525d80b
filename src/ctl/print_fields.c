/*
 * print_fields.c - etcdctl -w fields (printer_fields.go): one
 * `"Name" : value` line per item.  Numbers and booleans come from Go's
 * Println (decimal, true/false, enums by value name), strings and keys
 * from %q (ctl_quote); Println puts one space between operands, so an
 * empty string leaves `"Took" : ` with its trailing space.
 */
#define _GNU_SOURCE /* fopencookie */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "ctl/print.h"
#include "ctl/print_int.h"

static const Etcdserverpb__ResponseHeader zero_hdr =
    ETCDSERVERPB__RESPONSE_HEADER__INIT;

static void line_u64(FILE *f, const char *name, uint64_t v)
{
    fprintf(f, "\"%s\" : %" PRIu64 "\n", name, v);
}

static void line_i64(FILE *f, const char *name, int64_t v)
{
    fprintf(f, "\"%s\" : %" PRId64 "\n", name, v);
}

static void line_bool(FILE *f, const char *name, bool v)
{
    fprintf(f, "\"%s\" : %s\n", name, v ? "true" : "false");
}

/* line_q writes a line whose value is %q of n bytes. */
static void line_q(FILE *f, const char *name, const void *p, size_t n)
{
    fprintf(f, "\"%s\" : ", name);
    ctl_quote(f, p, n);
    fputc('\n', f);
}

static void line_qs(FILE *f, const char *name, const char *s)
{
    line_q(f, name, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

/* line_enum writes Println of a gogo enum: its String(), the value's name
 * or, for a value without one, its number. */
static void line_enum(FILE *f, const char *name,
                      const ProtobufCEnumDescriptor *d, int v)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    if (ev != NULL)
        fprintf(f, "\"%s\" : %s\n", name, ev->name);
    else
        fprintf(f, "\"%s\" : %d\n", name, v);
}

void ctl_fields_hdr(FILE *f, const Etcdserverpb__ResponseHeader *h)
{
    assert(f != NULL);
    if (h == NULL)
        h = &zero_hdr;
    line_u64(f, "ClusterID", h->cluster_id);
    line_u64(f, "MemberID", h->member_id);
    line_i64(f, "Revision", h->revision);
    line_u64(f, "RaftTerm", h->raft_term);
}

void ctl_fields_kv(FILE *f, const char *pfx, const Mvccpb__KeyValue *kv)
{
    static const Mvccpb__KeyValue zero = MVCCPB__KEY_VALUE__INIT;
    char name[64];
    assert(f != NULL && pfx != NULL && strlen(pfx) < 32);
    if (kv == NULL)
        kv = &zero;
#define NAME(s) (snprintf(name, sizeof name, "%s" s, pfx), name)
    line_q(f, NAME("Key"), kv->key.data, kv->key.len);
    line_i64(f, NAME("CreateRevision"), kv->create_revision);
    line_i64(f, NAME("ModRevision"), kv->mod_revision);
    line_i64(f, NAME("Version"), kv->version);
    line_q(f, NAME("Value"), kv->value.data, kv->value.len);
    line_i64(f, NAME("Lease"), kv->lease);
#undef NAME
}

void ctl_fields_range(FILE *f, const Etcdserverpb__RangeResponse *r)
{
    static const Etcdserverpb__RangeResponse zero =
        ETCDSERVERPB__RANGE_RESPONSE__INIT;
    if (r == NULL)
        r = &zero;
    ctl_fields_hdr(f, r->header);
    for (size_t i = 0; i < r->n_kvs; i++)
        ctl_fields_kv(f, "", r->kvs[i]);
    line_bool(f, "More", r->more);
    line_i64(f, "Count", r->count);
}

void ctl_fields_put(FILE *f, const Etcdserverpb__PutResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    if (r != NULL && r->prev_kv != NULL)
        ctl_fields_kv(f, "Prev", r->prev_kv);
}

void ctl_fields_delete(FILE *f, const Etcdserverpb__DeleteRangeResponse *r)
{
    static const Etcdserverpb__DeleteRangeResponse zero =
        ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
    if (r == NULL)
        r = &zero;
    ctl_fields_hdr(f, r->header);
    line_i64(f, "Deleted", r->deleted);
    for (size_t i = 0; i < r->n_prev_kvs; i++)
        ctl_fields_kv(f, "Prev", r->prev_kvs[i]);
}

/* The stdio cookie that writes the text given to it as the inside of %q:
 * the compact text format is all printable ASCII, so only \ and " need a
 * backslash. */
static ssize_t quote_write(void *cookie, const char *p, size_t n)
{
    FILE *out = cookie;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\')
            fputc('\\', out);
        fputc(p[i], out);
    }
    return (ssize_t)n;
}

/* unknown writes the line for a txn answer the fields printer has no case
 * for: %q of %+v of the oneof wrapper, "&{ResponseTxn:<text>}", or of a
 * nil interface, "<nil>". */
static void unknown(FILE *f, const Etcdserverpb__ResponseOp *op)
{
    static const cookie_io_functions_t io = {NULL, quote_write, NULL, NULL};
    fputs("\"Unknown\" : \"", f);
    if (op->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE__NOT_SET) {
        fputs("<nil>\"\n", f);
        return;
    }
    FILE *q = fopencookie(f, "w", io);
    if (q != NULL) {
        fputs("&{ResponseTxn:", q);
        if (op->response_txn != NULL)
            ctl_text_message(q, &op->response_txn->base);
        else
            fputs("<nil>", q);
        fputc('}', q);
        fclose(q);
    }
    fputs("\"\n", f);
}

void ctl_fields_txn(FILE *f, const Etcdserverpb__TxnResponse *r)
{
    static const Etcdserverpb__TxnResponse zero =
        ETCDSERVERPB__TXN_RESPONSE__INIT;
    if (r == NULL)
        r = &zero;
    ctl_fields_hdr(f, r->header);
    line_bool(f, "Succeeded", r->succeeded);
    for (size_t i = 0; i < r->n_responses; i++) {
        const Etcdserverpb__ResponseOp *op = r->responses[i];
        switch (op->response_case) {
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE:
            ctl_fields_delete(f, op->response_delete_range);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT:
            ctl_fields_put(f, op->response_put);
            break;
        case ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE:
            ctl_fields_range(f, op->response_range);
            break;
        default:
            unknown(f, op);
            break;
        }
    }
}

void ctl_fields_watch(FILE *f, const Etcdserverpb__WatchResponse *r)
{
    static const Etcdserverpb__WatchResponse zero =
        ETCDSERVERPB__WATCH_RESPONSE__INIT;
    if (r == NULL)
        r = &zero;
    ctl_fields_hdr(f, r->header);
    for (size_t i = 0; i < r->n_events; i++) {
        const Mvccpb__Event *e = r->events[i];
        line_enum(f, "Type", &mvccpb__event__event_type__descriptor, e->type);
        if (e->prev_kv != NULL)
            ctl_fields_kv(f, "Prev", e->prev_kv);
        ctl_fields_kv(f, "", e->kv);
    }
}

void ctl_fields_lease_grant(FILE *f, const Etcdserverpb__LeaseGrantResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    line_i64(f, "ID", r != NULL ? r->id : 0);
    line_i64(f, "TTL", r != NULL ? r->ttl : 0);
}

void ctl_fields_lease_keepalive(FILE *f,
                                const Etcdserverpb__LeaseKeepAliveResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    line_i64(f, "ID", r != NULL ? r->id : 0);
    line_i64(f, "TTL", r != NULL ? r->ttl : 0);
}

void ctl_fields_lease_timetolive(FILE *f,
                                 const Etcdserverpb__LeaseTimeToLiveResponse *r)
{
    static const Etcdserverpb__LeaseTimeToLiveResponse zero =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
    if (r == NULL)
        r = &zero;
    ctl_fields_hdr(f, r->header);
    line_i64(f, "ID", r->id);
    line_i64(f, "TTL", r->ttl);
    line_i64(f, "GrantedTTL", r->grantedttl);
    for (size_t i = 0; i < r->n_keys; i++)
        line_q(f, "Key", r->keys[i].data, r->keys[i].len);
}

void ctl_fields_lease_leases(FILE *f,
                             const Etcdserverpb__LeaseLeasesResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    for (size_t i = 0; r != NULL && i < r->n_leases; i++)
        line_i64(f, "ID", r->leases[i]->id);
}

void ctl_fields_member_list(FILE *f, const Etcdserverpb__MemberListResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    for (size_t i = 0; r != NULL && i < r->n_members; i++) {
        const Etcdserverpb__Member *m = r->members[i];
        line_u64(f, "ID", m->id);
        line_qs(f, "Name", m->name);
        for (size_t k = 0; k < m->n_peerurls; k++)
            line_qs(f, "PeerURL", m->peerurls[k]);
        for (size_t k = 0; k < m->n_clienturls; k++)
            line_qs(f, "ClientURL", m->clienturls[k]);
        line_bool(f, "IsLearner", m->islearner);
        fputc('\n', f);
    }
}

void ctl_fields_alarm(FILE *f, const Etcdserverpb__AlarmResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    for (size_t i = 0; r != NULL && i < r->n_alarms; i++) {
        line_u64(f, "MemberID", r->alarms[i]->memberid);
        line_enum(f, "AlarmType", &etcdserverpb__alarm_type__descriptor,
                  r->alarms[i]->alarm);
        fputc('\n', f);
    }
}

void ctl_fields_role_get(FILE *f, const Etcdserverpb__AuthRoleGetResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    for (size_t i = 0; r != NULL && i < r->n_perm; i++) {
        const Authpb__Permission *p = r->perm[i];
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
            &authpb__permission__type__descriptor, p->permtype);
        /* Println's operands `"PermType" : ` and the name: two spaces. */
        if (ev != NULL)
            fprintf(f, "\"PermType\" :  %s\n", ev->name);
        else
            fprintf(f, "\"PermType\" :  %d\n", (int)p->permtype);
        line_q(f, "Key", p->key.data, p->key.len);
        line_q(f, "RangeEnd", p->range_end.data, p->range_end.len);
    }
}

void ctl_fields_role_list(FILE *f, const Etcdserverpb__AuthRoleListResponse *r)
{
    ctl_fields_hdr(f, r != NULL ? r->header : NULL);
    fputs("\"Roles\" :", f);
    for (size_t i = 0; r != NULL && i < r->n_roles; i++) {
        fputc(' ', f);
        ctl_quote(f, r->roles[i], strlen(r->roles[i]));
    }
    fputc('\n', f);
}

void ctl_fields_endpoint_health(FILE *f, const struct ctl_ep_health *v,
                                size_t n)
{
    assert(v != NULL || n == 0);
    for (size_t i = 0; i < n; i++) {
        line_qs(f, "Endpoint", v[i].ep);
        line_bool(f, "Health", v[i].health);
        fprintf(f, "\"Took\" : %s\n", v[i].took != NULL ? v[i].took : "");
        fprintf(f, "\"Error\" : %s\n", v[i].error != NULL ? v[i].error : "");
        fputc('\n', f);
    }
}

void ctl_fields_endpoint_status(FILE *f, const struct ctl_ep_status *v,
                                size_t n)
{
    static const Etcdserverpb__StatusResponse zero =
        ETCDSERVERPB__STATUS_RESPONSE__INIT;
    assert(v != NULL || n == 0);
    for (size_t i = 0; i < n; i++) {
        const Etcdserverpb__StatusResponse *s =
            v[i].resp != NULL ? v[i].resp : &zero;
        ctl_fields_hdr(f, s->header);
        line_qs(f, "Version", s->version);
        line_i64(f, "DBSize", s->dbsize);
        line_u64(f, "Leader", s->leader);
        line_bool(f, "IsLearner", s->islearner);
        line_u64(f, "RaftIndex", s->raftindex);
        line_u64(f, "RaftTerm", s->raftterm);
        line_u64(f, "RaftAppliedIndex", s->raftappliedindex);
        fputs("\"Errors\" : [", f); /* Println of a []string */
        for (size_t k = 0; k < s->n_errors; k++)
            fprintf(f, "%s%s", k > 0 ? " " : "", s->errors[k]);
        fputs("]\n", f);
        line_qs(f, "Endpoint", v[i].ep);
        fputc('\n', f);
    }
}

void ctl_fields_endpoint_hashkv(FILE *f, const struct ctl_ep_hashkv *v,
                                size_t n)
{
    assert(v != NULL || n == 0);
    for (size_t i = 0; i < n; i++) {
        ctl_fields_hdr(f, v[i].resp != NULL ? v[i].resp->header : NULL);
        line_qs(f, "Endpoint", v[i].ep);
        line_u64(f, "Hash", v[i].resp != NULL ? v[i].resp->hash : 0);
        fputc('\n', f);
    }
}

void ctl_fields_db_status(FILE *f, const struct ctl_db_status *s)
{
    static const struct ctl_db_status zero;
    if (s == NULL)
        s = &zero;
    line_u64(f, "Hash", s->hash);
    line_i64(f, "Revision", s->revision);
    line_i64(f, "Keys", s->total_key);
    line_i64(f, "Size", s->total_size);
}
