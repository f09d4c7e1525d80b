/*
 * slow_apply.c - etcd's slow-apply warning (--experimental-warning-apply-
 * duration; etcdserver/util.go warnOfExpensiveRequest): a request whose
 * apply took longer than the duration is logged, in etcd 3.4's capnslog
 * words:
 *
 *   W | etcdserver: request "<request>" with result "<result>" took too
 *   long (<took>) to execute
 *
 * <request> is the request in protobuf's compact text form with values
 * given by their sizes, as etcd's InternalRaftStringer prints it:
 * header:<ID:7 > put:<key:"foo" value_size:3 >.  Puts, delete-ranges,
 * ranges, txns, compactions and lease grants, revokes and checkpoints are printed as
 * etcd prints them (ranges with their common fields only); alarms and
 * cetcd's member records by their name.  <result> is "size:<response
 * bytes>", or "error:<message>" for a request-level error (cetcd's
 * message for the code: etcd's differ in places, "lease not found").  <took> is a Go time.Duration ("1.234567ms").
 * Called on the apply thread only; it keeps no state.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/str.h"

/* etcd's DefaultWarningApplyDuration. */
#define WARN_APPLY_NS_DEFAULT 100000000ull
/* The longest request text logged; longer keys are cut there. */
#define TEXT_BYTES_MAX 1024

/* A bounded text buffer: writes past its end are dropped. */
struct text {
    char s[TEXT_BYTES_MAX]; /* NUL-terminated */
    size_t n;               /* bytes used, < sizeof s */
};

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->n, sizeof t->s - t->n, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->n += (size_t)n < sizeof t->s - t->n ? (size_t)n
                                               : sizeof t->s - t->n - 1;
}

/* bytes writes name:"<b>" as protobuf's text format escapes a bytes
 * field (C escapes, octal for other non-printable bytes); nothing when
 * empty (proto3 omits it). */
static void bytes(struct text *t, const char *name, ProtobufCBinaryData b)
{
    if (b.len == 0)
        return;
    put(t, "%s:\"", name);
    for (size_t i = 0; i < b.len; i++) {
        unsigned char c = b.data[i];
        if (c == '"' || c == '\\' || c == '\'')
            put(t, "\\%c", c);
        else if (c == '\n')
            put(t, "\\n");
        else if (c == '\r')
            put(t, "\\r");
        else if (c == '\t')
            put(t, "\\t");
        else if (c < 0x20 || c >= 0x7f)
            put(t, "\\%03o", c);
        else
            put(t, "%c", c);
    }
    put(t, "\" ");
}

/* The loggable forms of etcd's raft_internal_stringer.go: the fields of
 * the request in order, zero ones left out (proto3), a value by its size.
 * Each writes "<fields >" ending in a space after each field. */
static void put_fields(struct text *t, const Etcdserverpb__PutRequest *r)
{
    bytes(t, "key", r->key);
    if (r->value.len > 0)
        put(t, "value_size:%zu ", r->value.len);
    if (r->lease != 0)
        put(t, "lease:%" PRId64 " ", r->lease);
    if (r->prev_kv)
        put(t, "prev_kv:true ");
    if (r->ignore_value)
        put(t, "ignore_value:true ");
    if (r->ignore_lease)
        put(t, "ignore_lease:true ");
}

static void range_fields(struct text *t, const Etcdserverpb__RangeRequest *r)
{
    bytes(t, "key", r->key);
    bytes(t, "range_end", r->range_end);
    if (r->limit != 0)
        put(t, "limit:%" PRId64 " ", r->limit);
    if (r->revision != 0)
        put(t, "revision:%" PRId64 " ", r->revision);
    if (r->serializable)
        put(t, "serializable:true ");
    if (r->keys_only)
        put(t, "keys_only:true ");
    if (r->count_only)
        put(t, "count_only:true ");
}

static void delete_fields(struct text *t,
                          const Etcdserverpb__DeleteRangeRequest *r)
{
    bytes(t, "key", r->key);
    bytes(t, "range_end", r->range_end);
    if (r->prev_kv)
        put(t, "prev_kv:true ");
}

static void compare_fields(struct text *t, const Etcdserverpb__Compare *c)
{
    static const char *results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
    static const char *targets[] = {"VERSION", "CREATE", "MOD", "VALUE",
                                    "LEASE"};
    if (c->result > 0 && (size_t)c->result < 4)
        put(t, "result:%s ", results[c->result]);
    if (c->target > 0 && (size_t)c->target < 5)
        put(t, "target:%s ", targets[c->target]);
    bytes(t, "key", c->key);
    switch (c->target_union_case) {
    case ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION:
        put(t, "version:%" PRId64 " ", c->version);
        break;
    case ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION:
        put(t, "create_revision:%" PRId64 " ", c->create_revision);
        break;
    case ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION:
        put(t, "mod_revision:%" PRId64 " ", c->mod_revision);
        break;
    case ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE:
        if (c->value.len > 0) /* the loggable form: a plain field */
            put(t, "value_size:%zu ", c->value.len);
        break;
    case ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE:
        put(t, "lease:%" PRId64 " ", c->lease);
        break;
    default:
        break;
    }
    bytes(t, "range_end", c->range_end);
}

static void txn_fields(struct text *t, const Etcdserverpb__TxnRequest *r,
                       int depth);

/* ops writes etcd's loggable RequestOps, joined by spaces. */
static void ops(struct text *t, Etcdserverpb__RequestOp *const *v, size_t n,
                int depth)
{
    for (size_t i = 0; i < n; i++) {
        const Etcdserverpb__RequestOp *op = v[i];
        put(t, i > 0 ? " " : "");
        switch (op->request_case) {
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
            put(t, "request_put:<");
            put_fields(t, op->request_put);
            put(t, ">");
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
            put(t, "request_range:<");
            range_fields(t, op->request_range);
            put(t, "> ");
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
            put(t, "request_delete_range:<");
            delete_fields(t, op->request_delete_range);
            put(t, "> ");
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
            put(t, "request_txn:<");
            txn_fields(t, op->request_txn, depth + 1);
            put(t, ">");
            break;
        default:
            break;
        }
    }
}

/* depth bounds the recursion of nested txns (the text is cut anyway). */
static void txn_fields(struct text *t, const Etcdserverpb__TxnRequest *r,
                       int depth)
{
    if (depth > 8) {
        put(t, "...");
        return;
    }
    put(t, "compare:<");
    for (size_t i = 0; i < r->n_compare; i++) {
        put(t, i > 0 ? " " : "");
        compare_fields(t, r->compare[i]);
    }
    put(t, "> success:<");
    ops(t, r->success, r->n_success, depth);
    put(t, "> failure:<");
    ops(t, r->failure, r->n_failure, depth);
    put(t, ">");
}

static void request_text(struct text *t, const Cetcdpb__InternalRequest *r)
{
    put(t, "header:<ID:%" PRIu64 " > ", r->id);
    switch (r->request_case) {
    case CETCDPB__INTERNAL_REQUEST__REQUEST_PUT:
        put(t, "put:<");
        put_fields(t, r->put);
        put(t, ">");
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_DELETE_RANGE:
        put(t, "delete_range:<");
        delete_fields(t, r->delete_range);
        put(t, "> ");
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_RANGE:
        put(t, "range:<");
        range_fields(t, r->range);
        put(t, "> ");
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_TXN:
        put(t, "txn:<");
        txn_fields(t, r->txn, 0);
        put(t, ">");
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_COMPACTION:
        put(t, "compaction:<revision:%" PRId64 " > ",
            r->compaction->revision);
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_GRANT:
        put(t, "lease_grant:<ttl:%" PRId64 "-second id:%016" PRIx64 ">",
            r->lease_grant->ttl, (uint64_t)r->lease_grant->id);
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_REVOKE:
        put(t, "lease_revoke:<id:%016" PRIx64 ">",
            (uint64_t)r->lease_revoke->id);
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_LEASE_CHECKPOINT:
        put(t, "lease_checkpoint:<");
        for (size_t i = 0; i < r->lease_checkpoint->n_checkpoints; i++)
            put(t, "checkpoints:<ID:%" PRId64 " remaining_TTL:%" PRId64 " > ",
                r->lease_checkpoint->checkpoints[i]->id,
                r->lease_checkpoint->checkpoints[i]->remaining_ttl);
        put(t, "> ");
        break;
    default: /* alarms, and cetcd's own member records */
        put(t, "%s:<> ", r->request_case ==
                                 CETCDPB__INTERNAL_REQUEST__REQUEST_ALARM
                             ? "alarm"
                             : "member");
        break;
    }
}

/* quoted writes s as Go's %q does for printable ASCII: in double quotes,
 * with '"' and '\' escaped. */
static void quoted(struct text *t, const char *s)
{
    put(t, "\"");
    for (; *s; s++)
        put(t, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    put(t, "\"");
}

void server__warn_slow_apply(const struct server *s,
                             const Cetcdpb__InternalRequest *req, int err,
                             const ProtobufCMessage *resp, uint64_t took_ns)
{
    CHECK(s != NULL && req != NULL);
    uint64_t limit = s->cfg.warn_apply_ns ? s->cfg.warn_apply_ns
                                          : WARN_APPLY_NS_DEFAULT;
    if (took_ns <= limit)
        return;
    struct text r = {.n = 0}, line = {.n = 0}, result = {.n = 0};
    request_text(&r, req);
    if (err != 0)
        put(&result, "error:%s", err_str(err));
    else if (resp != NULL)
        put(&result, "size:%zu", protobuf_c_message_get_packed_size(resp));
    quoted(&line, r.s);
    put(&line, " with result ");
    quoted(&line, result.s);
    put(&line, " took too long (");
    char took[40];
    put(&line, "%s", str_go_duration(took, sizeof took, took_ns));
    put(&line, ") to execute");
    CHECK(line.n < sizeof line.s);
    log_warn("etcdserver", "request %s", line.s);
}
