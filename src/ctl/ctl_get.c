/*
 * ctl_get.c - "get": reads a key or a range of keys, as etcdctl 3.4.23's
 * get command (its flags, argument checks, the RangeRequest clientv3
 * builds from them, and the answer in every output format).  txn builds
 * its get operations here too (ctl_kv_get_kind).
 */
#include <ctype.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_kv.h"
#include "ctl/print.h"

static const char *consistency, *sort_order, *sort_target;
static int64_t limit, rev;
static bool prefix, from_key, keys_only, value_only;

static struct ctl_flag flags[] = {
    {"consistency", 0, CTL_FLAG_STRING, &consistency, "l",
     "Linearizable(l) or Serializable(s)", false},
    {"order", 0, CTL_FLAG_STRING, &sort_order, "",
     "Order of results; ASCEND or DESCEND (ASCEND by default)", false},
    {"sort-by", 0, CTL_FLAG_STRING, &sort_target, "",
     "Sort target; CREATE, KEY, MODIFY, VALUE, or VERSION", false},
    {"limit", 0, CTL_FLAG_INT64, &limit, "0", "Maximum number of results",
     false},
    {"prefix", 0, CTL_FLAG_BOOL, &prefix, "false",
     "Get keys with matching prefix", false},
    {"from-key", 0, CTL_FLAG_BOOL, &from_key, "false",
     "Get keys that are greater than or equal to the given key using byte "
     "compare",
     false},
    {"rev", 0, CTL_FLAG_INT64, &rev, "0", "Specify the kv revision", false},
    {"keys-only", 0, CTL_FLAG_BOOL, &keys_only, "false", "Get only the keys",
     false},
    {"print-value-only", 0, CTL_FLAG_BOOL, &value_only, "false",
     "Only write values when using the \"simple\" output format", false},
    CTL_FLAG_END,
};

/* The first byte string after every key that starts with key (clientv3's
 * getPrefix): the last byte below 0xff incremented, what follows it cut;
 * "\0" (every key from key on) when key is all 0xff. */
ProtobufCBinaryData ctl_kv_prefix_end(const struct ctl_kv_arg *key)
{
    ProtobufCBinaryData end = {1, (uint8_t *)"\0"};
    for (size_t i = key->n; i > 0; i--) {
        if ((unsigned char)key->p[i - 1] == 0xff)
            continue;
        uint8_t *e = ctl_kv_keep(malloc(i));
        memcpy(e, key->p, i);
        e[i - 1]++;
        end.data = e;
        end.len = i;
        break;
    }
    return end;
}

/* upper_eq: s upper-cased (Go's strings.ToUpper, ASCII here) is want. */
static bool upper_eq(const char *s, const char *want)
{
    for (; *s && *want; s++, want++)
        if (toupper((unsigned char)*s) != *want)
            return false;
    return *s == *want;
}

/* sort_options sets the order and target from --order and --sort-by. */
static void sort_options(Etcdserverpb__RangeRequest *r)
{
    static const char *const targets[] = {"KEY", "VERSION", "CREATE",
                                          "MODIFY", "VALUE"};
    r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE;
    if (upper_eq(sort_order, "ASCEND"))
        r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
    else if (upper_eq(sort_order, "DESCEND"))
        r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
    else if (sort_order[0])
        ctl_exit(CTL_EXIT_BAD_FEATURE, "bad sort order %s", sort_order);
    int t = sort_target[0] ? -1 : 0;
    for (int i = 0; i < 5 && t < 0; i++)
        if (upper_eq(sort_target, targets[i]))
            t = i;
    if (t < 0)
        ctl_exit(CTL_EXIT_BAD_FEATURE, "bad sort target %s", sort_target);
    r->sort_target = (Etcdserverpb__RangeRequest__SortTarget)t;
    /* clientv3's WithSort: ascending by key is the server's own order, so
     * it asks for no sorting (and the server need not read everything) */
    if (r->sort_target == ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY &&
        r->sort_order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND)
        r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE;
}

/* range_build checks the arguments in etcdctl's order and fills r. */
static void range_build(const struct ctl_kv_arg *a, int n,
                        Etcdserverpb__RangeRequest *r)
{
    char q[512];
    assert(r != NULL && n >= 0);
    assert(n == 0 || a != NULL);
    if (n == 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "get command needs one argument as key "
                                    "and an optional argument as range_end");
    if (prefix && from_key)
        ctl_exit(CTL_EXIT_BAD_ARGS, "`--prefix` and `--from-key` cannot be "
                                    "set at the same time, choose one");
    if (strcmp(consistency, "s") == 0)
        r->serializable = true;
    else if (strcmp(consistency, "l") != 0)
        ctl_exit(CTL_EXIT_BAD_FEATURE, "unknown consistency flag %s",
                 ctl_kv_quote(consistency, strlen(consistency), q, sizeof q));
    r->key = (ProtobufCBinaryData){a[0].n, (uint8_t *)a[0].p};
    if (n > 1 && (prefix || from_key))
        ctl_exit(CTL_EXIT_BAD_ARGS, "too many arguments, only accept one "
                                    "argument when `--prefix` or "
                                    "`--from-key` is set");
    if (n > 1)
        r->range_end = (ProtobufCBinaryData){a[1].n, (uint8_t *)a[1].p};
    r->limit = limit;
    r->revision = rev > 0 ? rev : 0;
    sort_options(r);
    static const ProtobufCBinaryData zero = {1, (uint8_t *)"\0"};
    if ((prefix || from_key) && a[0].n == 0)
        r->key = zero; /* etcdctl: an empty key means every key */
    if (prefix && a[0].n > 0)
        r->range_end = ctl_kv_prefix_end(&a[0]);
    else if (prefix || from_key)
        r->range_end = zero;
    r->keys_only = keys_only;
    assert(r->key.len > 0 || !(prefix || from_key));
}

static void build_op(const struct ctl_kv_arg *a, int n,
                     Etcdserverpb__RequestOp *op)
{
    Etcdserverpb__RangeRequest *r = ctl_kv_keep(malloc(sizeof *r));
    *r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
    range_build(a, n, r);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    op->request_range = r;
}

void ctl_kv_range_simple(const Etcdserverpb__RangeResponse *r,
                         bool value_only_)
{
    for (size_t i = 0; i < r->n_kvs; i++)
        ctl_simple_kv(stdout, ctl_g.hex, value_only_, r->kvs[i]);
}

/* display prints the answer as etcdctl's printer for the format does. */
static void display(enum ctl_output out, const Etcdserverpb__RangeResponse *r)
{
    switch (out) {
    case CTL_OUT_SIMPLE:
        ctl_kv_range_simple(r, value_only);
        break;
    case CTL_OUT_JSON:
        ctl_json_message(stdout, &r->base);
        break;
    case CTL_OUT_PROTOBUF:
        ctl_pb_message(stdout, &r->base);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_range(stdout, r);
        break;
    case CTL_OUT_TABLE:
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    }
}

static int run(int argc, char **argv)
{
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    range_build(ctl_kv_args_from(argc, argv), argc, &req);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__RangeResponse *resp = (Etcdserverpb__RangeResponse *)ctl_call(
        "/etcdserverpb.KV/Range", &req.base,
        &etcdserverpb__range_response__descriptor);
    /* etcdctl checks this only once it has the answer */
    if (value_only && out != CTL_OUT_SIMPLE)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "print-value-only is only for `--write-out=simple`");
    display(out, resp);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    ctl_kv_release();
    return CTL_EXIT_SUCCESS;
}

const struct ctl_cmd ctl_cmd_get = {
    .use = "get [options] <key> [range_end]",
    .short_desc = "Gets the key or a range of keys",
    .flags = flags,
    .run = run,
};

const struct ctl_kv_kind ctl_kv_get_kind = {
    .name = "get",
    .flags = flags,
    .help_head = "Gets the key or a range of keys",
    .usage =
        "Usage:\n"
        "   get [options] <key> [range_end] [flags]\n"
        "\n"
        "Flags:\n"
        "      --consistency string   Linearizable(l) or Serializable(s) "
        "(default \"l\")\n"
        "      --from-key             Get keys that are greater than or "
        "equal to the given key using byte compare\n"
        "  -h, --help                 help for get\n"
        "      --keys-only            Get only the keys\n"
        "      --limit int            Maximum number of results\n"
        "      --order string         Order of results; ASCEND or DESCEND "
        "(ASCEND by default)\n"
        "      --prefix               Get keys with matching prefix\n"
        "      --print-value-only     Only write values when using the "
        "\"simple\" output format\n"
        "      --rev int              Specify the kv revision\n"
        "      --sort-by string       Sort target; CREATE, KEY, MODIFY, "
        "VALUE, or VERSION\n",
    .build = build_op,
};
